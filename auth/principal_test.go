package auth

import (
	"context"
	"testing"
)

func TestPrincipalSeesOnlyItsTeam(t *testing.T) {
	viewer := Principal{Subject: "token:a", Team: "payments", Role: RoleViewer}
	if !viewer.CanSee("payments") || viewer.CanSee("search") {
		t.Fatalf("viewer of payments: CanSee(payments)=%v CanSee(search)=%v", viewer.CanSee("payments"), viewer.CanSee("search"))
	}
	if viewer.Allows("payments", RoleOperator) {
		t.Fatal("a viewer may not act as an operator")
	}
	op := Principal{Subject: "token:b", Team: "payments", Role: RoleOperator}
	if !op.Allows("payments", RoleViewer) || !op.Allows("payments", RoleOperator) || op.Allows("payments", RoleAdmin) {
		t.Fatal("operator: want viewer and operator rights, not admin")
	}
	if op.Allows("search", RoleViewer) {
		t.Fatal("an operator of payments may not act on search")
	}
	noTeam := Principal{Subject: "token:c", Role: RoleAdmin}
	if noTeam.CanSee("") || noTeam.Allows("", RoleViewer) {
		t.Fatal("a principal without a team sees nothing")
	}
	admin := Principal{Subject: "token:d", ClusterAdmin: true}
	if !admin.CanSee("search") || !admin.Allows("payments", RoleAdmin) {
		t.Fatal("a cluster admin acts on every team")
	}
}

func TestPrincipalContext(t *testing.T) {
	if _, ok := FromContext(context.Background()); ok {
		t.Fatal("an empty context carries no principal")
	}
	want := Principal{Subject: "token:a", Team: "payments", Role: RoleAdmin}
	got, ok := FromContext(NewContext(context.Background(), want))
	if !ok || got != want {
		t.Fatalf("FromContext = %+v, %v; want %+v", got, ok, want)
	}
}

func TestParseRole(t *testing.T) {
	for _, r := range []Role{RoleViewer, RoleOperator, RoleAdmin} {
		got, err := ParseRole(r.String())
		if err != nil || got != r {
			t.Fatalf("ParseRole(%q) = %v, %v", r.String(), got, err)
		}
	}
	if _, err := ParseRole("owner"); err == nil {
		t.Fatal("ParseRole(owner) must fail")
	}
}

func TestCheckTeamName(t *testing.T) {
	t.Parallel()
	for name, ok := range map[string]bool{
		"payments": true, "team-7": true, "0ps": true,
		"": false, "Pay Ments": false, "-lead": false, "a.b": false,
		// sundial.jobs.status is the registry's answers, not a team's topic.
		"status": false,
	} {
		if err := CheckTeamName(name); (err == nil) != ok {
			t.Errorf("CheckTeamName(%q) = %v, want ok %v", name, err, ok)
		}
	}
}
