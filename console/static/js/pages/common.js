// What the pages share: bounded fan-out, paging links and action buttons.

import {h, replace, errorBox} from '../dom.js';

// limited maps items through fn with at most n calls in flight, so that a
// page of rows never floods the API.
export async function limited(items, n, fn) {
  const out = new Array(items.length);
  let next = 0;
  async function worker() {
    while (next < items.length) {
      const i = next++;
      try {
        out[i] = await fn(items[i]);
      } catch (e) {
        out[i] = {error: e};
      }
    }
  }
  await Promise.all(Array.from({length: Math.min(n, items.length)}, worker));
  return out;
}

// pager links the first and the next page; page tokens live in the URL's
// "page" parameter, so the browser's Back is the previous page.
export function pager(ctx, parts, nextToken) {
  const q = new URLSearchParams(ctx.route.query);
  const onFirst = !q.get('page');
  q.delete('page');
  const first = h('button', {type: 'button', disabled: onFirst, onclick: () => ctx.go(parts, q)}, 'First page');
  const nq = new URLSearchParams(q);
  if (nextToken) nq.set('page', nextToken);
  const next = h('button', {type: 'button', disabled: !nextToken, onclick: () => ctx.go(parts, nq)}, 'Next page');
  return h('div', {class: 'pager'}, first, next, nextToken ? null : h('span', {class: 'muted'}, 'last page'));
}

// action is a write button: marked data-write (the browser tests check a
// viewer sees none), it disables itself while the call runs and shows the
// outcome in status.
export function action(label, status, fn, cls) {
  const b = h('button', {type: 'button', class: cls || null, 'data-write': 'true'}, label);
  b.addEventListener('click', async () => {
    b.disabled = true;
    replace(status, `${label}…`);
    try {
      const msg = await fn();
      replace(status, msg || `${label}: done`);
    } catch (e) {
      replace(status, errorBox(e));
    } finally {
      b.disabled = false;
    }
  });
  return b;
}

// confirmTyped asks for a typed confirmation before a destructive call.
export function confirmTyped(label, expect, status, fn) {
  const box = h('div', {class: 'confirm', hidden: true});
  const input = h('input', {type: 'text', id: 'confirm-text', autocomplete: 'off', spellcheck: 'false'});
  const go = action(`Confirm: ${label}`, status, async () => {
    if (input.value !== expect) throw new Error(`type "${expect}" to confirm`);
    box.hidden = true;
    return fn();
  }, 'danger');
  const cancel = h('button', {type: 'button', onclick: () => {
    box.hidden = true;
    open.focus();
  }}, 'Cancel');
  replace(box, h('label', {for: 'confirm-text', class: 'field'}, `Type ${expect} to confirm`), input, go, cancel);
  const open = h('button', {type: 'button', class: 'danger', 'data-write': 'true', onclick: () => {
    box.hidden = false;
    input.value = '';
    input.focus();
  }}, `${label}…`);
  return [open, box];
}

// filterForm builds a GET-like form whose submit puts its fields in the
// URL (dropping the page token).
export function filterForm(ctx, parts, fields) {
  const form = h('form', {class: 'filters', role: 'search'}, fields,
    h('button', {type: 'submit'}, 'Apply'));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v) q.set(k, String(v));
    ctx.go(parts, q);
  });
  return form;
}

export function field(label, id, control) {
  control.id = id;
  return h('label', {for: id}, label, control);
}

export function select(name, value, options) {
  return h('select', {name}, options.map(([v, text]) => h('option', {value: v, selected: v === value}, text)));
}

export function textInput(name, value, attrs) {
  return h('input', {type: 'text', name, value: value || '', ...(attrs || {})});
}

// loadInto runs fn and puts its nodes in el, or the error.
export async function loadInto(el, fn) {
  try {
    replace(el, await fn());
  } catch (e) {
    replace(el, errorBox(e));
  }
}
