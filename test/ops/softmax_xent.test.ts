import { describeSuite } from './node-runner.ts';
import { suite } from './softmax_xent.cases.ts';

describeSuite(suite);
