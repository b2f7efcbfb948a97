package target

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOutputKeepsTheNewestLinesWithinItsBounds(t *testing.T) {
	t.Parallel()
	var nilOut *Output
	assert.Nil(t, nilOut.Lines())
	assert.Nil(t, (&Output{}).Lines())

	o := &Output{}
	for i := range MaxOutputLines + 5 {
		o.Append(fmt.Sprintf("line %d\n", i))
	}
	lines := o.Lines()
	require.Len(t, lines, MaxOutputLines+1)
	assert.Equal(t, "… 5 earlier line(s) dropped", lines[0])
	assert.Equal(t, "line 5", lines[1])
	assert.Equal(t, fmt.Sprintf("line %d", MaxOutputLines+4), lines[len(lines)-1])

	o = &Output{}
	o.Append(strings.Repeat("é", MaxOutputLineBytes)) // two bytes a rune
	long := o.Lines()[0]
	assert.LessOrEqual(t, len(long), MaxOutputLineBytes+len("…"))
	assert.True(t, strings.HasSuffix(long, "é…"), "cut on a rune boundary")

	o = &Output{}
	for range 100 {
		o.Append(strings.Repeat("x", MaxOutputLineBytes))
	}
	total := 0
	for _, l := range o.Lines()[1:] {
		total += len(l)
	}
	assert.LessOrEqual(t, total, MaxOutputBytes)
}

func TestLineWriterSplitsLinesAndCapsBytes(t *testing.T) {
	t.Parallel()
	o := &Output{}
	w := &lineWriter{out: o, limit: 20}
	_, _ = w.Write([]byte("first\nsec"))
	_, _ = w.Write([]byte("ond\nthird line is long"))
	w.close()
	assert.Equal(t, []string{"first", "second", "third l", "… output truncated: 31 bytes written, 20 captured"}, o.Lines())
}

// sink records the lines an Output hands its Tail.
type sink struct {
	lines   []string
	skipped int64
}

func (s *sink) Line(l string)   { s.lines = append(s.lines, l) }
func (s *sink) Skipped(n int64) { s.skipped += n }

func TestOutputHandsEveryLineToItsTail(t *testing.T) {
	t.Parallel()
	s := &sink{}
	o := &Output{Tail: s}
	for i := range MaxOutputLines + 5 {
		o.Append(fmt.Sprintf("line %d\n", i))
	}
	long := strings.Repeat("é", MaxOutputLineBytes)
	o.Append(long)
	require.Len(t, s.lines, MaxOutputLines+6, "the tail gets every line, also those the Output drops later")
	assert.Equal(t, "line 0", s.lines[0], "without its newline")
	assert.Equal(t, o.Lines()[len(o.Lines())-1], s.lines[len(s.lines)-1], "a long line is cut as the Output keeps it")
}

// TestLiveLinesGoToTheTailAndKeptLinesToTheLog: a remote worker's lines
// sent as it runs (Live) reach the Tail only, cut as Append cuts them,
// with the count it left out; its final lines (Keep) are the kept log and
// do not reach the Tail again.
func TestLiveLinesGoToTheTailAndKeptLinesToTheLog(t *testing.T) {
	t.Parallel()
	s := &sink{}
	o := &Output{Tail: s}
	long := strings.Repeat("x", MaxOutputLineBytes+10)
	o.Live([]string{"one\n", long}, 3)
	assert.Nil(t, o.Lines(), "live lines are not kept")
	require.Len(t, s.lines, 2)
	assert.Equal(t, "one", s.lines[0])
	assert.Equal(t, strings.Repeat("x", MaxOutputLineBytes)+"…", s.lines[1])
	assert.Equal(t, int64(3), s.skipped)
	o.Keep([]string{"one", long, "two"})
	assert.Len(t, s.lines, 2, "kept lines reached the tail")
	assert.Equal(t, []string{"one", strings.Repeat("x", MaxOutputLineBytes) + "…", "two"}, o.Lines())
	(&Output{}).Live([]string{"no tail"}, 1)
}
