import { describeSuite } from './node-runner.ts';
import { suite } from './batchnorm.cases.ts';

describeSuite(suite);
