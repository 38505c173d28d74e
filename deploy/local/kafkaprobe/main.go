// Command kafkaprobe answers whether a Kafka broker is ready to serve clients.
//
// It makes one Metadata request with kafka-go, the client sluice uses, and exits 0
// when the broker answers and lists itself (a KRaft broker appears in metadata only
// once it is registered and unfenced), 1 otherwise, printing the reason on stderr.
// With -group it also asks for a consumer group coordinator; the first such request
// on a new broker creates __consumer_offsets, so a broker that passes is ready for
// consumer groups too. deploy/local/services.sh calls it in a loop while it waits
// for a broker to start.
//
//	kafkaprobe -addr 127.0.0.1:9092 -timeout 2s [-group]
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9092", "broker address host:port")
	timeout := flag.Duration("timeout", 2*time.Second, "deadline of the single attempt")
	group := flag.Bool("group", false, "also require a consumer group coordinator")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := probe(ctx, *addr, *group); err != nil {
		fmt.Fprintf(os.Stderr, "kafkaprobe: %s: %v\n", *addr, err)
		os.Exit(1)
	}
}

// probe returns nil when the broker at addr answers a Metadata request that lists
// it (in a cluster, the others may be listed long before a restarted node has
// registered) and, with group, names a coordinator for a consumer group.
func probe(ctx context.Context, addr string, group bool) error {
	client := &kafka.Client{Addr: kafka.TCP(addr)}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{}})
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	if !lists(md.Brokers, addr) {
		return fmt.Errorf("metadata: %s is not registered yet (%d brokers listed)", addr, len(md.Brokers))
	}
	if !group {
		return nil
	}
	fc, err := client.FindCoordinator(ctx, &kafka.FindCoordinatorRequest{
		Key: "sluice-kafkaprobe", KeyType: kafka.CoordinatorKeyTypeConsumer,
	})
	if err == nil {
		err = fc.Error
	}
	if err != nil {
		return fmt.Errorf("find group coordinator: %w", err)
	}
	return nil
}

// lists reports whether brokers holds the one at addr (host:port).
func lists(brokers []kafka.Broker, addr string) bool {
	for _, b := range brokers {
		if net.JoinHostPort(b.Host, strconv.Itoa(b.Port)) == addr {
			return true
		}
	}
	return false
}
