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

// call sends one unary call and returns the decoded answer.
export async function call(token, service, method, body) {
  let res;
  try {
    res = await fetch(new URL(`sundial.api.v1.${service}/${method}`, apiBase()), {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        'Connect-Protocol-Version': '1',
        'Authorization': `Bearer ${token}`,
      },
      body: JSON.stringify(body || {}),
      cache: 'no-store',
      credentials: 'omit',
    });
  } catch (e) {
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
