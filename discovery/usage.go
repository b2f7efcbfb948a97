package discovery

import (
	"time"
)

// usage samples the process's CPU time and memory; cpu reports the CPU
// used since the previous sample, in cores.
type usage struct {
	lastCPU  time.Duration
	lastWall time.Time
}

// sample returns the CPU use since the previous sample (0 on the first) and
// the memory in use.
func (u *usage) sample(now time.Time) (cores float64, mem uint64) {
	cpu := processCPU()
	if !u.lastWall.IsZero() && now.After(u.lastWall) {
		cores = float64(cpu-u.lastCPU) / float64(now.Sub(u.lastWall))
	}
	u.lastCPU, u.lastWall = cpu, now
	return max(cores, 0), processMemory()
}
