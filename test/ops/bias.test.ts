import { describeSuite } from './node-runner.ts';
import { suite } from './bias.cases.ts';

describeSuite(suite);
