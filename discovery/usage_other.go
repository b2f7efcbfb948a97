//go:build !unix

package discovery

import (
	"runtime/metrics"
	"time"
)

// processCPU is the Go runtime's estimate of the CPU time spent running Go
// code and the garbage collector where getrusage does not exist.
func processCPU() time.Duration {
	s := []metrics.Sample{{Name: "/cpu/classes/user:cpu-seconds"}, {Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(s)
	var sec float64
	for _, x := range s {
		if x.Value.Kind() == metrics.KindFloat64 {
			sec += x.Value.Float64()
		}
	}
	return time.Duration(sec * float64(time.Second))
}

func processMemory() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
