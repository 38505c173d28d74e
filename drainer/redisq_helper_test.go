package drainer_test

import "github.com/sluicehq/sluice/queue/redisq"

// mustRedisConsumer returns c, panicking on err (a Redis consumer fails to
// build only without a Redis client, which every caller here passes).
func mustRedisConsumer(c *redisq.Consumer, err error) *redisq.Consumer {
	if err != nil {
		panic(err)
	}
	return c
}
