import { describeSuite } from './node-runner.ts';
import { suite } from './pool.cases.ts';

describeSuite(suite);
