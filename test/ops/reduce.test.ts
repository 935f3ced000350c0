import { describeSuite } from './node-runner.ts';
import { suite } from './reduce.cases.ts';

describeSuite(suite);
