import { describeSuite } from './node-runner.ts';
import { suite } from './gemm.cases.ts';

describeSuite(suite);
