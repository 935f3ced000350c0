import { describeSuite } from './node-runner.ts';
import { suite } from './conv2d.cases.ts';

describeSuite(suite);
