"""StructTypes of the event families streamsmith ships pipelines for."""
