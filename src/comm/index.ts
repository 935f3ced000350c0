// Public API of the ring all-reduce. Browser-safe: Node-only helpers live in ./node.ts.
export { RingError, isRingError, type RingErrorKind } from './errors.ts';
export { Ring, DEFAULT_RING_SETTINGS, type RingInit, type RingSettings } from './ring.ts';
export { allReduceSum, allReduceSentBytes, DEFAULT_MESSAGE_BYTES, type AllReduceOptions } from './allreduce.ts';
export type { Link, LinkEvents } from './link.ts';
export { MemoryLink, memoryLinkPair } from './memory-link.ts';
export { memoryRing } from './memory-ring.ts';
export { type WireFormat, WIRE_FORMATS, HEADER_BYTES, MAX_FRAME_BYTES } from '../protocol/frames.ts';
export { chunkRange } from './plan.ts';
export { openEndpoint, PeerEndpoint, type EndpointOptions, type FormRingOptions } from './peer-endpoint.ts';
export { loadBrowserPeer, type SignalingAddress, type PeerCtor } from './peerjs-peer.ts';
export { PeerJsLink } from './peerjs-link.ts';
export {
  planTopology, roleOf, checkTopology, speedOrder, twoLevelRounds, flatRounds, MIN_TWO_LEVEL_PEERS, type Topology, type PeerLinkInfo, type PlanOptions,
  type TwoLevelRole,
} from './topology.ts';
export { allReduceTwoLevel, TwoLevelRings, type TwoLevelOptions, type TwoLevelRingsInit } from './hierarchical.ts';
export { memoryTwoLevel, type MemoryTwoLevel, type MemoryTwoLevelOptions, type PeerMemoryLinks } from './memory-two-level.ts';
