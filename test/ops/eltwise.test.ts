import { describeSuite } from './node-runner.ts';
import { suite } from './eltwise.cases.ts';

describeSuite(suite);
