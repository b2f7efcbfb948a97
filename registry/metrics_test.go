package registry

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMetricField(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "labels", metricField(`labels["a]b"]`))
	assert.Equal(t, "retry.non_retryable_errors", metricField("retry.non_retryable_errors[3]"))
	assert.Equal(t, "schedule.cron.expression", metricField("schedule.cron.expression"))
}
