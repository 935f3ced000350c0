import { describeSuite } from './node-runner.ts';
import { suite } from './topk.cases.ts';

describeSuite(suite);
