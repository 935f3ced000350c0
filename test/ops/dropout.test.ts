import { describeSuite } from './node-runner.ts';
import { suite } from './dropout.cases.ts';

describeSuite(suite);
