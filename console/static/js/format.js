// Formatting what the API answers: protojson durations ("1.500s"),
// timestamps (RFC 3339), enum names and schedules.

// seconds reads a protojson duration; NaN when unset.
export function seconds(d) {
  if (typeof d !== 'string' || !d.endsWith('s')) return NaN;
  return Number(d.slice(0, -1));
}

// duration writes seconds for people: "850 ms", "4.2 s", "3 min 5 s".
export function duration(s) {
  if (!Number.isFinite(s)) return '–';
  const sign = s < 0 ? '−' : '';
  s = Math.abs(s);
  if (s < 1) return `${sign}${Math.round(s * 1000)} ms`;
  if (s < 60) return `${sign}${Number.isInteger(s) ? s : s.toFixed(s < 10 ? 2 : 1)} s`;
  if (s < 3600) return `${sign}${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  if (s < 86400) return `${sign}${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
  return `${sign}${Math.floor(s / 86400)} d ${Math.round((s % 86400) / 3600)} h`;
}

const units = {ms: 0.001, s: 1, m: 60, min: 60, h: 3600, d: 86400};

// span reads what people write for a duration, "250ms", "2s", "1.5m",
// "1h", "7d", as seconds; NaN otherwise.
export function span(text) {
  const m = /^(\d+(?:\.\d+)?)(ms|s|min|m|h|d)$/.exec(String(text).trim());
  return m ? Number(m[1]) * units[m[2]] : NaN;
}

// viewerZone is the browser's time zone.
export const viewerZone = Intl.DateTimeFormat().resolvedOptions().timeZone;

const formats = new Map();

// time writes a timestamp in a zone (default the viewer's), with the
// zone's abbreviation; "–" when unset.
export function time(ts, zone) {
  if (!ts) return '–';
  const d = new Date(ts);
  if (Number.isNaN(d.getTime())) return String(ts);
  const z = zone || viewerZone;
  let f = formats.get(z);
  if (!f) {
    try {
      f = new Intl.DateTimeFormat('en-CA', {
        timeZone: z, year: 'numeric', month: '2-digit', day: '2-digit',
        hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23', timeZoneName: 'short',
      });
    } catch {
      return d.toISOString();
    }
    formats.set(z, f);
  }
  return f.format(d).replace(',', '');
}

// between is the seconds from one timestamp to another; NaN if either is
// unset.
export function between(from, to) {
  if (!from || !to) return NaN;
  return (new Date(to).getTime() - new Date(from).getTime()) / 1000;
}

// enumName shortens an enum value: RUN_ATTEMPT_STATE_FAILED -> failed.
export function enumName(v, prefix) {
  if (!v) return '';
  return String(v).replace(prefix, '').toLowerCase();
}

const days = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'];

function plural(n, unit) {
  return n === 1 ? unit : `${n} ${unit}s`;
}

// describeCron reads the common shapes of a cron expression in words and
// returns '' for the others (the expression is shown beside it anyway).
// The fire times themselves always come from the server's calculator
// (GetJobView), never from here.
export function describeCron(expr) {
  let f = String(expr || '').trim().split(/\s+/);
  if (f.length === 5) f = ['0', ...f];
  if (f.length !== 6) return '';
  const [sec, min, hour, dom, mon, dow] = f;
  const every = (v) => /^\*\/(\d+)$/.exec(v);
  const isNum = (v) => /^\d+$/.test(v);
  const restAny = (i) => f.slice(i).every((v) => v === '*' || v === '?');
  let m;
  if (sec === '*' && restAny(1)) return 'every second';
  if ((m = every(sec)) && restAny(1)) return `every ${plural(Number(m[1]), 'second')}`;
  if (isNum(sec) && min === '*' && restAny(2)) return `every minute at :${sec.padStart(2, '0')}`;
  if (isNum(sec) && (m = every(min)) && restAny(2)) return `every ${plural(Number(m[1]), 'minute')}`;
  if (isNum(sec) && isNum(min) && hour === '*' && restAny(3)) return `every hour at minute ${min}`;
  if (isNum(sec) && isNum(min) && (m = every(hour)) && restAny(3)) return `every ${plural(Number(m[1]), 'hour')} at minute ${min}`;
  if (isNum(sec) && isNum(min) && isNum(hour) && mon === '*') {
    const at = `at ${hour.padStart(2, '0')}:${min.padStart(2, '0')}${sec === '0' ? '' : ':' + sec.padStart(2, '0')}`;
    if ((dom === '*' || dom === '?') && (dow === '*' || dow === '?')) return `${at} every day`;
    if ((dom === '*' || dom === '?') && /^[0-7](-[0-7])?$/.test(dow)) {
      const [a, b] = dow.split('-').map(Number);
      return b === undefined ? `${at} every ${days[a]}` : `${at} ${days[a]}–${days[b]}`;
    }
    if (isNum(dom) && (dow === '*' || dow === '?')) return `${at} on day ${dom} of every month`;
  }
  return '';
}

// schedule describes a job's schedule in words.
export function schedule(s) {
  if (!s) return 'no schedule: runs only when triggered';
  const zone = s.timeZone || 'UTC';
  if (s.cron) {
    const words = describeCron(s.cron.expression);
    return `${words ? words + ' ' : ''}(cron "${s.cron.expression}", ${zone})`;
  }
  if (s.interval) {
    let anchor = '';
    if (s.interval.offset) anchor = `, offset ${duration(seconds(s.interval.offset))}`;
    if (s.interval.start) anchor = `, from ${time(s.interval.start, zone)}`;
    return `every ${duration(seconds(s.interval.every))}${anchor}`;
  }
  if (s.at) return `once at ${time(s.at.time, zone)}`;
  if (s.delay) return `once, ${duration(seconds(s.delay.duration))} after it is applied`;
  if (s.immediate) return 'once, when applied';
  return 'no schedule: runs only when triggered';
}

// jobState is a job's state in words.
export function jobState(job) {
  return job && job.state === 'DEFINITION_STATE_PAUSED' ? 'paused' : 'active';
}
