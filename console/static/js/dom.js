// Building DOM nodes. Text is always set as text (never as HTML), so data
// from the API cannot inject markup; and nothing sets a style attribute or
// an inline handler, which the content security policy would refuse.

// h creates an element: h('a', {href: '#/jobs', class: 'x'}, 'text', child).
// Attributes whose value is false, null or undefined are left out; on*
// keys become event listeners.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith('on') && typeof v === 'function') {
      el.addEventListener(k.slice(2).toLowerCase(), v);
    } else if (k === 'dataset') {
      Object.assign(el.dataset, v);
    } else if (k === 'value') {
      el.value = v;
    } else {
      el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// add appends children to el as h does: arrays flattened, and null,
// undefined and false left out (the DOM's own append writes them as text),
// so that a page adds what a role may see with a plain condition.
export function add(el, ...children) {
  append(el, children);
}

// replace swaps a node's children for new ones.
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

// table builds a table from a header row and rows of cells.
export function table(caption, headers, rows) {
  return h('table', {},
    caption ? h('caption', {class: 'visually-hidden'}, caption) : null,
    h('thead', {}, h('tr', {}, headers.map((t) => {
      const [text, cls] = Array.isArray(t) ? t : [t, null];
      return h('th', {scope: 'col', class: cls}, text);
    }))),
    h('tbody', {}, rows.map((r) => h('tr', {}, r.map((c) => {
      if (c && c.cell) return h('td', {class: c.cls}, c.cell);
      return h('td', {}, c);
    })))));
}

// num marks a table cell as a number (right-aligned).
export function num(v) {
  return {cell: v, cls: 'num'};
}

// errorBox shows an API error in words.
export function errorBox(err) {
  const code = err && err.code ? `${err.code}: ` : '';
  return h('p', {class: 'error', role: 'alert'}, code + (err && err.message ? err.message : String(err)));
}

// stateTag shows a state with a class per state.
export function stateTag(state) {
  const s = String(state || 'unknown');
  return h('span', {class: `state state-${s}`}, s.replaceAll('_', ' '));
}
