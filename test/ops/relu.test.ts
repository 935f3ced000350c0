import { describeSuite } from './node-runner.ts';
import { suite } from './relu.cases.ts';

describeSuite(suite);
