package apiserver_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/sundialhq/sundial/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testenv.GocqlSchemaAgreement())
}
