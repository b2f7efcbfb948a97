package cassandra_test

import (
	"testing"

	"github.com/sundialhq/sundial/quota"
	"github.com/sundialhq/sundial/quota/quotatest"
)

func TestQuotaConformance(t *testing.T) {
	t.Parallel()
	_, s := setup(t)
	quotatest.Run(t, func(*testing.T) quota.Store { return s })
}
