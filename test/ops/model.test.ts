import { describeSuite } from './node-runner.ts';
import { suite } from './model.cases.ts';

describeSuite(suite);
