import { describeSuite } from './node-runner.ts';
import { suite } from './lrn.cases.ts';

describeSuite(suite);
