package bench

import (
	"testing"
)

// The system may hand out a port again once freeLoopbackAddr has closed it;
// a subprocess must still get an address no other subprocess was given.
func TestUnusedAddrSkipsAddressesGivenToAnotherSubprocess(t *testing.T) {
	picks := []string{"127.0.0.1:1001", "127.0.0.1:1002", "127.0.0.1:1001", "127.0.0.1:1002", "127.0.0.1:1003"}
	p := NewProcesses(PipelineConfig{}, "", "")
	p.pickAddr = func() (string, error) {
		a := picks[0]
		picks = picks[1:]
		return a, nil
	}
	p.pprof["dispatcher-0"], _ = p.unusedAddr()
	p.metrics["dispatcher-0"], _ = p.unusedAddr()
	got, err := p.unusedAddr()
	if err != nil {
		t.Fatal(err)
	}
	if got != "127.0.0.1:1003" {
		t.Fatalf("unusedAddr = %s after 1001 and 1002 were given, want 127.0.0.1:1003", got)
	}

	p.pickAddr = func() (string, error) { return "127.0.0.1:1001", nil }
	if addr, err := p.unusedAddr(); err == nil {
		t.Fatalf("unusedAddr = %s, want an error when every pick is taken", addr)
	}
}
