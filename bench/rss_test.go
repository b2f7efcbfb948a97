package bench

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseProcStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    ProcMemory
		wantErr string
	}{
		{
			name: "both figures",
			in:   "Name:\tsundial\nVmPeak:\t 900000 kB\nVmHWM:\t   20480 kB\nVmRSS:\t   10240 kB\nThreads:\t12\n",
			want: ProcMemory{RSS: 10 << 20, HWM: 20 << 20},
		},
		{name: "VmHWM missing", in: "VmRSS:\t 10240 kB\n", wantErr: "missing"},
		{name: "not kB", in: "VmRSS:\t 10 MB\nVmHWM:\t 10 kB\n", wantErr: "VmRSS: unexpected value"},
		{name: "not a number", in: "VmRSS:\t x kB\nVmHWM:\t 10 kB\n", wantErr: "VmRSS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseProcStatus([]byte(tt.in))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestReadProcMemoryOfThisProcess(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc on this system")
	}
	m, err := ReadProcMemory(os.Getpid())
	require.NoError(t, err)
	assert.Positive(t, m.RSS)
	assert.GreaterOrEqual(t, m.HWM, m.RSS)
}

func TestMemorySampler(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc on this system")
	}
	now := from.Add(-time.Minute)
	var stored int64
	var said []string
	running := true
	s := &memorySampler{name: "me", every: time.Second, now: func() time.Time { return now },
		pid:    func() (int, bool) { return os.Getpid(), running },
		stored: func() int64 { return stored }, marks: memoryMarks(50_000),
		say: func(format string, _ ...any) { said = append(said, format) }}
	for _, n := range []int64{0, 9_999, 10_000, 30_000, 50_000, 50_000} {
		stored = n
		s.sample()
		now = now.Add(30 * time.Second)
	}
	running = false // restarting
	s.sample()
	r := s.report(from, from.Add(time.Minute))
	require.Len(t, r.Milestones, 2)
	assert.Equal(t, int64(10_000), r.Milestones[0].Sample.Stored)
	assert.Equal(t, from, r.Milestones[0].Sample.At, "the first sample at 10,000")
	assert.Equal(t, int64(50_000), r.Milestones[1].Stored)
	assert.Equal(t, from.Add(time.Minute), r.Milestones[1].Sample.At)
	assert.Len(t, r.Samples, 6)
	assert.Equal(t, 1, r.Errors)
	assert.Len(t, said, 2, "each milestone said once")
	assert.Positive(t, r.WindowMaxRSSMiB, "the samples at from and from+30s are in the window")
	assert.GreaterOrEqual(t, r.PeakHWMMiB, r.WindowMaxRSSMiB)
}

func TestMemoryMarks(t *testing.T) {
	t.Parallel()
	assert.Equal(t, []int64{5000}, memoryMarks(5000))
	assert.Equal(t, []int64{10_000}, memoryMarks(10_000))
	assert.Equal(t, []int64{10_000, 1_000_000}, memoryMarks(1_000_000))
}
