"""The Kafka client edge: with `monitor.sources.kafka`, the only modules that import aiokafka.

`client` (how every client connects), `frames` (aiokafka's frame-holding fix),
`dead_letter` (the dead-letter producer), `probe` (whether the brokers answer),
`publisher` (the scores topic's producer), `topics` (the demo's plain helpers),
`ledger` (the token budget's ledger on the source's commits).
The consumer the pipeline reads from is `monitor.sources.kafka.KafkaSource`.
"""
