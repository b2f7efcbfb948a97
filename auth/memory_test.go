package auth_test

import (
	"testing"

	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/auth/authtest"
)

func TestMemoryStoreConformance(t *testing.T) {
	t.Parallel()
	authtest.Run(t, func(*testing.T) auth.TokenStore { return auth.NewMemoryStore() })
}
