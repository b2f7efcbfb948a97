package dagengine_test

import (
	"log/slog"
	"testing"

	"go.uber.org/goleak"

	"github.com/sundialhq/sundial/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testenv.GocqlSchemaAgreement())
}

// testLogger logs to the test at warning level and above (testenv.Logger).
func testLogger(t *testing.T) *slog.Logger { return testenv.Logger(t, slog.LevelWarn) }
