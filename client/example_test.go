package client_test

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sundialhq/sundial/client"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A team defines a job on its own topic and waits for the registry's
// answer. (Compiled, not run: it needs Kafka and a registry.)
func ExampleClient_Apply() {
	ctx := context.Background()
	c, err := client.New(client.Config{Kafka: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:9092")}, Team: "payments"})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	spec := &sundialv1.JobSpec{
		Id:        "payments.settle",
		OwnerTeam: "payments",
		Schedule: &sundialv1.Schedule{TimeZone: "Europe/Berlin",
			Kind: &sundialv1.Schedule_Interval{Interval: &sundialv1.Interval{Every: durationpb.New(time.Hour)}}},
		Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "settle"}}},
	}
	receipt, err := c.Apply(ctx, spec) // a *jobspec.ValidationError names every bad field
	if err != nil {
		panic(err)
	}
	statuses, err := c.WaitStatus(ctx, receipt)
	if err != nil {
		panic(err)
	}
	fmt.Println(statuses[0].GetOutcome())
}
