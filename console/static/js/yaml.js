// YAML for people: a definition as the file `sundial jobs apply -f` reads
// (jobspec.DecodeFile takes the protobuf JSON form written as YAML). Only
// writing: YAML that a person types in the editor is read by the server
// (a DefinitionDocument of PlanApply and ApplyJob, decoded by
// jobspec.DecodeFile), so there is one reader and it cannot drift.

// plain matches a string that YAML reads back as the same string without
// quotes; anything else is written double-quoted with JSON's escapes,
// which YAML's double-quoted style reads the same.
const plain = /^[A-Za-z_][A-Za-z0-9_./-]*$/;
const reserved = /^(?:true|false|yes|no|on|off|y|n|null|~)$/i;

function scalar(v) {
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  const s = String(v);
  return plain.test(s) && !reserved.test(s) ? s : JSON.stringify(s);
}

function isEmpty(v) {
  return (Array.isArray(v) && v.length === 0) || (v && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length === 0);
}

function emptyOf(v) {
  return Array.isArray(v) ? '[]' : '{}';
}

function lines(v, indent, out) {
  const pad = ' '.repeat(indent);
  if (Array.isArray(v)) {
    for (const item of v) {
      if (item && typeof item === 'object' && !isEmpty(item)) {
        const sub = [];
        lines(item, indent + 2, sub);
        out.push(`${pad}- ${sub[0].trimStart()}`, ...sub.slice(1));
      } else {
        out.push(`${pad}- ${isEmpty(item) ? emptyOf(item) : scalar(item)}`);
      }
    }
    return;
  }
  for (const [k, val] of Object.entries(v)) {
    if (val && typeof val === 'object' && !isEmpty(val)) {
      out.push(`${pad}${scalar(k)}:`);
      lines(val, indent + 2, out);
    } else {
      out.push(`${pad}${scalar(k)}: ${isEmpty(val) ? emptyOf(val) : scalar(val)}`);
    }
  }
}

// toYAML writes a JSON value (an object, as JSON.parse gives it) as YAML,
// keys in their order, two spaces a level.
export function toYAML(value) {
  if (value === null || typeof value !== 'object') return `${scalar(value)}\n`;
  if (isEmpty(value)) return `${emptyOf(value)}\n`;
  const out = [];
  lines(value, 0, out);
  return `${out.join('\n')}\n`;
}
