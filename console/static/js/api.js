// The API client: the public Connect HTTP/JSON endpoints, exactly as any
// client calls them (POST /sundial.api.v1.<Service>/<Method>, a JSON body,
// Authorization: Bearer). The console has no endpoint of its own.

// ApiError is a refused or failed call: code is Connect's error code
// ("permission_denied", "not_found", ...), or "unavailable" when the
// server could not be reached.
export class ApiError extends Error {
  constructor(code, message, status) {
    super(message);
    this.code = code;
    this.status = status;
  }
}

// apiBase is the API's root URL: the parent of the console's folder, so a
// proxy may mount the whole API under any sub-path.
export function apiBase() {
  return new URL('../', window.location.href);
}

// callTimeoutMs bounds every call unless the caller names another bound
// (a backfill that runs its occurrences). The server, told by the
// Connect-Timeout-Ms header, ends the call's work at that deadline and
// answers deadline_exceeded; the browser gives up a little later in case
// that answer is lost. No page waits for ever on a call that never ends.
export const callTimeoutMs = 30000;
const abortGraceMs = 5000;

// call sends one unary call and returns the decoded answer; opts.timeoutMs
// replaces callTimeoutMs.
export async function call(token, service, method, body, opts) {
  const timeoutMs = (opts && opts.timeoutMs) || callTimeoutMs;
  const abortAfterMs = timeoutMs + abortGraceMs;
  let res;
  try {
    res = await fetch(new URL(`sundial.api.v1.${service}/${method}`, apiBase()), {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        'Connect-Protocol-Version': '1',
        'Connect-Timeout-Ms': String(timeoutMs),
        'Authorization': `Bearer ${token}`,
      },
      body: JSON.stringify(body || {}),
      cache: 'no-store',
      credentials: 'omit',
      signal: AbortSignal.timeout(abortAfterMs),
    });
  } catch (e) {
    if (e.name === 'TimeoutError') {
      throw new ApiError('deadline_exceeded', `the API did not answer ${service}.${method} within ${abortAfterMs / 1000} s`, 0);
    }
    throw new ApiError('unavailable', `the API did not answer: ${e.message}`, 0);
  }
  const text = await res.text();
  let data = {};
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = {message: text};
    }
  }
  if (!res.ok) {
    throw new ApiError(data.code || `http_${res.status}`, data.message || res.statusText, res.status);
  }
  return data;
}
