// The donor's lasting id, kept in this browser's IndexedDB (its own small database): the
// coordinator credits the device's work to it (JoinRequest.donor), so the credit is still
// there on the next visit. A browser that keeps no storage (private windows may refuse
// IndexedDB) donates under a fresh id each visit, and says so.
import { openDB } from 'idb';

const DB = 'volunteer-trainer-donor';
const STORE = 'donor';

/** A random id of 22 characters [A-Za-z0-9_-] (DONOR_ID). */
function freshId(): string {
  const b = crypto.getRandomValues(new Uint8Array(16));
  return btoa(String.fromCharCode(...b)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/** This browser's donor id (created on the first visit), and whether it will last. */
export async function donorId(): Promise<{ id: string; kept: boolean }> {
  try {
    const db = await openDB(DB, 1, { upgrade: (d) => { d.createObjectStore(STORE); } });
    let id = (await db.get(STORE, 'id')) as string | undefined;
    if (typeof id !== 'string' || !/^[A-Za-z0-9_-]{8,64}$/.test(id)) {
      id = freshId();
      await db.put(STORE, id, 'id');
    }
    db.close();
    return { id, kept: true };
  } catch {
    return { id: freshId(), kept: false };
  }
}
