package discovery

import (
	"cmp"
	"maps"
	"slices"
	"time"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// State is where a member is in its life as the Directory sees it.
type State int

const (
	// Live is a member whose newest announcement is within the expiry
	// bound.
	Live State = iota
	// Expired is a member that stopped heartbeating (crashed, or cut off)
	// and whose expiry bound passed.
	Expired
	// Left is a member that stopped cleanly and wrote its tombstone.
	Left
)

func (s State) String() string {
	switch s {
	case Live:
		return "live"
	case Expired:
		return "expired"
	case Left:
		return "left"
	}
	return "unknown"
}

// Member is one executor as announced.
type Member struct {
	ID       string
	Pool     string
	Labels   map[string]string
	Version  string
	Blocking string
	// Capacity is the runs it may execute at once in its pool; InFlight
	// those executing at its last heartbeat.
	Capacity int
	InFlight int
	// CPUCores is its CPU use over its last interval, in cores;
	// MemoryBytes its resident memory.
	CPUCores    float64
	MemoryBytes uint64
	// Heartbeat is the time of its newest announcement, Started when it
	// started, both by its clock. Interval is how often it announces.
	Heartbeat time.Time
	Started   time.Time
	Interval  time.Duration
	State     State
	// Handlers are the handlers it executes, per team (ServedHandler).
	Handlers []ServedHandler
}

// ServedHandler is a handler an executor executes: for Team's runs, or
// for every team's when Team is empty (a handler compiled into the
// executor); for the runs of jobs of Pool, or of the executor's own pool
// when Pool is empty (a worker gateway names the pool of its workers).
type ServedHandler struct {
	Team string
	Name string
	Pool string
}

// Serves reports whether the member executes team's runs of the handler
// name for jobs of pool (a pool name, "default" included: never empty).
func (m Member) Serves(pool, team, name string) bool {
	for _, h := range m.Handlers {
		if h.Name == name && (h.Team == "" || h.Team == team) && cmp.Or(h.Pool, m.Pool) == pool {
			return true
		}
	}
	return false
}

// Free is the slots the member had free at its last heartbeat.
func (m Member) Free() int { return max(m.Capacity-m.InFlight, 0) }

func (m Member) clone() Member {
	m.Labels = maps.Clone(m.Labels)
	m.Handlers = slices.Clone(m.Handlers)
	return m
}

// memberOf converts an announcement; it reports false when the announcement
// lacks what a member needs.
func memberOf(a *sundialv1.ExecutorAnnouncement) (Member, bool) {
	if a.GetExecutorId() == "" || a.GetPool() == "" || a.GetHeartbeatTime() == nil || a.GetHeartbeatIntervalMs() == 0 {
		return Member{}, false
	}
	m := Member{
		ID:          a.GetExecutorId(),
		Pool:        a.GetPool(),
		Labels:      maps.Clone(a.GetLabels()),
		Version:     a.GetVersion(),
		Blocking:    a.GetBlocking(),
		Capacity:    int(a.GetCapacity()),
		InFlight:    int(a.GetInFlight()),
		CPUCores:    a.GetCpuCores(),
		MemoryBytes: a.GetMemoryBytes(),
		Heartbeat:   a.GetHeartbeatTime().AsTime(),
		Interval:    time.Duration(a.GetHeartbeatIntervalMs()) * time.Millisecond,
	}
	for _, h := range a.GetHandlers() {
		m.Handlers = append(m.Handlers, ServedHandler{Team: h.GetTeam(), Name: h.GetName(), Pool: h.GetPool()})
	}
	if a.GetStartedTime() != nil {
		m.Started = a.GetStartedTime().AsTime()
	}
	return m, true
}
