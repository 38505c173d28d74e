package kafkaq

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestSettingsDefaults: every zero field takes its documented default, and
// set fields are kept.
func TestSettingsDefaults(t *testing.T) {
	t.Parallel()
	got, err := Settings{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{
		Brokers: []string{DefaultBroker}, Topic: DefaultTopic, Partitions: DefaultPartitions,
		ReplicationFactor: DefaultReplicationFactor, DLQTopic: DefaultDLQTopic, BatchTimeout: DefaultBatchTimeout,
		ProduceTimeout: DefaultProduceTimeout, ConsumerGroup: DefaultConsumerGroup,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("zero Settings with defaults (-want +got):\n%s", diff)
	}
	set := Settings{Brokers: []string{"b:1"}, Topic: "t", Partitions: 3, ReplicationFactor: 2, DLQTopic: "d",
		BatchTimeout: time.Millisecond, ProduceTimeout: time.Second, ConsumerGroup: "g"}
	if got, err := set.withDefaults(); err != nil || !cmp.Equal(set, got) {
		t.Errorf("set Settings with defaults = %+v, %v; want them unchanged", got, err)
	}
}
