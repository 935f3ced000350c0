import { describeSuite } from './node-runner.ts';
import { suite } from './optim.cases.ts';

describeSuite(suite);
