// A server stream of the Connect protocol over fetch (WatchRuns), so that
// the stream carries Authorization: Bearer as every other call does (a
// browser's EventSource cannot send that header). Each message is an
// envelope: one flags byte, a 4-byte big-endian length, then the JSON
// message; flag 2 marks the end of the stream, whose JSON carries the
// error, if any.

import {ApiError, apiBase} from './api.js';

const endStream = 2;

function envelope(body) {
  const json = new TextEncoder().encode(JSON.stringify(body || {}));
  const out = new Uint8Array(5 + json.length);
  new DataView(out.buffer).setUint32(1, json.length);
  out.set(json, 5);
  return out;
}

// Frames cuts a byte stream into envelopes.
class Frames {
  constructor() {
    this.buf = new Uint8Array(0);
  }

  push(chunk) {
    const b = new Uint8Array(this.buf.length + chunk.length);
    b.set(this.buf);
    b.set(chunk, this.buf.length);
    this.buf = b;
  }

  // next returns the next whole envelope {flags, data}, or null.
  next() {
    if (this.buf.length < 5) return null;
    const n = new DataView(this.buf.buffer, this.buf.byteOffset).getUint32(1);
    if (this.buf.length < 5 + n) return null;
    const flags = this.buf[0];
    const data = JSON.parse(new TextDecoder().decode(this.buf.subarray(5, 5 + n)));
    this.buf = this.buf.slice(5 + n);
    return {flags, data};
  }
}

// watch opens a server stream and calls onMessage for each message until
// the stream ends or signal aborts it. It resolves when the stream ends
// (normally or by abort) and rejects with an ApiError when the server
// refuses or breaks it.
export async function watch(token, service, method, body, onMessage, signal) {
  let res;
  try {
    res = await fetch(new URL(`sundial.api.v1.${service}/${method}`, apiBase()), {
      method: 'POST',
      headers: {
        'Content-Type': 'application/connect+json',
        'Connect-Protocol-Version': '1',
        'Authorization': `Bearer ${token}`,
      },
      body: envelope(body),
      cache: 'no-store',
      credentials: 'omit',
      signal,
    });
  } catch (e) {
    if (signal && signal.aborted) return;
    throw new ApiError('unavailable', `the API did not answer: ${e.message}`, 0);
  }
  if (!res.ok) {
    let data = {};
    try {
      data = await res.json();
    } catch {
      data = {};
    }
    throw new ApiError(data.code || `http_${res.status}`, data.message || res.statusText, res.status);
  }
  const reader = res.body.getReader();
  const frames = new Frames();
  try {
    for (;;) {
      const {done, value} = await reader.read();
      if (done) return;
      frames.push(value);
      for (let f = frames.next(); f; f = frames.next()) {
        if (f.flags & endStream) {
          if (f.data && f.data.error) throw new ApiError(f.data.error.code || 'unknown', f.data.error.message || '', res.status);
          return;
        }
        onMessage(f.data);
      }
    }
  } catch (e) {
    if (signal && signal.aborted) return;
    if (e instanceof ApiError) throw e;
    throw new ApiError('unavailable', `the stream broke: ${e.message}`, 0);
  }
}
