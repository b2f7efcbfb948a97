package cassandra_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/sundialhq/sundial/internal/testenv"
)

// TestMain checks that closing the store (and failing to open one) leaves no
// driver goroutine behind, but for gocql's schema-agreement goroutine
// (testenv.GocqlSchemaAgreement says why).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testenv.GocqlSchemaAgreement())
}
