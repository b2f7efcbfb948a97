package metricdeps

import "github.com/prometheus/client_golang/prometheus"

// Registerer returns r, or a new private registry when r is nil.
func Registerer(r prometheus.Registerer) prometheus.Registerer {
	if r == nil {
		return prometheus.NewRegistry()
	}
	return r
}
