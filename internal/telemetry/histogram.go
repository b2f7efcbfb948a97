package telemetry

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Native-histogram parameters of the histograms built with HistogramOpts.
const (
	// NativeBucketFactor bounds the growth from one native bucket to the
	// next: 1.1 keeps a quantile's relative error under 5 %.
	NativeBucketFactor = 1.1
	// NativeMaxBuckets caps the native buckets of one series; past it the
	// resolution is halved, so memory stays bounded whatever is observed.
	NativeMaxBuckets = 160
	// NativeMinResetDuration is how long a series keeps its buckets before
	// the client may reset it to regain resolution.
	NativeMinResetDuration = time.Hour
)

// HistogramOpts returns the options of a histogram that Prometheus can
// scrape both ways: classic buckets, which every Prometheus ingests and which
// the dashboards and alert rules use (a ratio against a fixed threshold needs
// the threshold to be a bucket boundary), and native-histogram parameters,
// which a Prometheus with native histograms enabled ingests as well (with
// always_scrape_classic_histograms set, it keeps both).
//
// name is the full metric name, sundial_<component>_<what>_<unit>. Nil
// buckets mean LatencyBuckets. Set ConstLabels on the result if needed.
func HistogramOpts(name, help string, buckets []float64) prometheus.HistogramOpts {
	if buckets == nil {
		buckets = LatencyBuckets()
	}
	return prometheus.HistogramOpts{
		Name:                            name,
		Help:                            help,
		Buckets:                         buckets,
		NativeHistogramBucketFactor:     NativeBucketFactor,
		NativeHistogramMaxBucketNumber:  NativeMaxBuckets,
		NativeHistogramMinResetDuration: NativeMinResetDuration,
	}
}

// LatencyBuckets are classic buckets, in seconds, for latencies measured from
// a due time (trigger and dispatch latency): from 1 ms to 5 min, with the
// objective of 1 s as a boundary. A new slice on each call.
func LatencyBuckets() []float64 {
	return []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}
}

// CallBuckets are classic buckets, in seconds, for calls to a backend (one
// Redis command, one Cassandra statement): from 100 µs to 10 s. A new slice on
// each call.
func CallBuckets() []float64 {
	return []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10}
}
