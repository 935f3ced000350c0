// A private job's page and dashboard read the coordinator with the token in the page's own
// address (?token=: the join link, or the view link npm start prints): as a Bearer header where
// the page fetches, and as ?token= where the browser fetches by itself (EventSource, images,
// the model's download link), which cannot set a header (coordinator/routes.ts checkAccess;
// join.ts withToken puts it there).

/** The page's own query string ('' outside a browser: the dashboard's views are also rendered in tests). */
export const pageSearch = (): string => globalThis.location?.search ?? '';

/** The token in the page's address, or null (a public job's page has none). */
export function pageToken(search: string = pageSearch()): string | null {
  const t = new URLSearchParams(search).get('token');
  return t && /^[A-Za-z0-9_-]{1,256}$/.test(t) ? t : null;
}

/** GET `path` on the coordinator with the page's token. */
export function apiFetch(path: string, token: string | null = pageToken()): Promise<Response> {
  return fetch(path, token ? { headers: { authorization: `Bearer ${token}` } } : undefined);
}

/** What to tell a person whose page the coordinator refused (401 or 403); null for any other answer. */
export function refusedMessage(status: number): string | null {
  if (status === 401) return 'this job is private: open the link its owner gave you (it carries ?token=...)';
  if (status === 403) return 'this job is private and the token in this address does not open it: ask its owner for the current link';
  return null;
}
