package target

import (
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Bounds of an attempt's Output. They keep a run event (and the history row
// it becomes) small whatever a handler or command writes: the newest lines
// are kept, the oldest dropped first.
const (
	MaxOutputLines     = 200
	MaxOutputLineBytes = 1024
	MaxOutputBytes     = 32 * 1024
)

// Output keeps the last lines an attempt logged, within MaxOutputLines and
// MaxOutputBytes; a line longer than MaxOutputLineBytes is cut. It is safe
// for concurrent use, since a handler may log from several goroutines. The
// zero value is ready.
type Output struct {
	// Tail, when set, also receives every line as it is appended, cut as
	// the Output keeps it, in order: package logtail ships it to the
	// attempt's live tail. It is called under the Output's lock and must
	// not block.
	Tail LineSink

	mu      sync.Mutex
	lines   []string
	bytes   int
	dropped int
}

// Append adds one line (a trailing newline is removed; a line with newlines
// inside is kept as one line).
func (o *Output) Append(line string) {
	line = cutLine(line)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.Tail != nil {
		o.Tail.Line(line)
	}
	o.keepLocked(line)
}

// Keep adds lines as Append does, without handing them to the Tail: the
// final lines of an attempt that a remote worker sent its Tail earlier,
// as it ran (Live).
func (o *Output) Keep(lines []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, l := range lines {
		o.keepLocked(cutLine(l))
	}
}

// Live hands the Tail lines an attempt logged elsewhere while it runs (a
// team's worker, through the worker gateway), cut as Append cuts them,
// and dropped, how many lines the worker left out before sending these.
// They are not kept: the attempt's final lines come with its outcome
// (Keep). Without a Tail it does nothing.
func (o *Output) Live(lines []string, dropped int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.Tail == nil {
		return
	}
	for _, l := range lines {
		o.Tail.Line(cutLine(l))
	}
	o.Tail.Skipped(dropped)
}

// cutLine is a line as an Output keeps it: without its trailing newlines,
// and cut at MaxOutputLineBytes on a character boundary, with an
// ellipsis.
func cutLine(line string) string {
	line = strings.TrimRight(line, "\n")
	if len(line) > MaxOutputLineBytes {
		cut := MaxOutputLineBytes
		for cut > 0 && !utf8.RuneStart(line[cut]) {
			cut--
		}
		line = line[:cut] + "…"
	}
	return line
}

// keepLocked keeps line, dropping the oldest lines over the bounds.
// Called with mu held.
func (o *Output) keepLocked(line string) {
	o.lines = append(o.lines, line)
	o.bytes += len(line)
	for len(o.lines) > MaxOutputLines || o.bytes > MaxOutputBytes {
		o.bytes -= len(o.lines[0])
		o.lines[0] = ""
		o.lines = o.lines[1:]
		o.dropped++
	}
}

// Lines returns the kept lines, oldest first, preceded by a line saying how
// many were dropped when some were. Nil when nothing was logged.
func (o *Output) Lines() []string {
	if o == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.lines) == 0 && o.dropped == 0 {
		return nil
	}
	out := make([]string, 0, len(o.lines)+1)
	if o.dropped > 0 {
		out = append(out, "… "+itoa(o.dropped)+" earlier line(s) dropped")
	}
	return append(out, o.lines...)
}

// LineSink receives an attempt's log lines as they are logged.
type LineSink interface {
	// Line is one line, cut as the Output keeps it.
	Line(line string)
	// Skipped counts n lines left out before they reached the sink (a
	// team's worker's bounds, Live).
	Skipped(n int64)
}

// lineWriter is an io.Writer that splits what it is given into lines of
// an Output, keeping at most limit bytes; a final partial line waits for
// its newline or for close.
type lineWriter struct {
	out     *Output
	partial []byte
	limit   int // most bytes accepted; the rest is counted, not kept
	total   int
}

func (w *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	w.total += n
	if room := w.limit - (w.total - n); room < len(p) {
		p = p[:max(room, 0)]
	}
	for len(p) > 0 {
		i := strings.IndexByte(string(p), '\n')
		if i < 0 {
			w.partial = append(w.partial, p...)
			if len(w.partial) > MaxOutputLineBytes {
				w.out.Append(string(w.partial))
				w.partial = w.partial[:0]
			}
			break
		}
		w.out.Append(string(append(w.partial, p[:i]...)))
		w.partial = w.partial[:0]
		p = p[i+1:]
	}
	return n, nil
}

// close flushes the partial line and notes output past the limit.
func (w *lineWriter) close() {
	if len(w.partial) > 0 {
		w.out.Append(string(w.partial))
		w.partial = nil
	}
	if w.total > w.limit {
		w.out.Append("… output truncated: " + itoa(w.total) + " bytes written, " + itoa(w.limit) + " captured")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
