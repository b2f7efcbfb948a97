// Package authtest is the conformance suite of auth.TokenStore. Every
// implementation runs it from its own tests:
//
//	authtest.Run(t, func(t *testing.T) auth.TokenStore { ... })
//
// The factory is called once; the cases share the store it returns and
// each uses team names and token ids of its own, so a store need not be
// emptied between cases (creating a Cassandra keyspace per case would cost
// more than the cases). The suite states in tests what auth.TokenStore's
// doc promises in prose.
package authtest
