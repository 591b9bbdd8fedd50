"""Pure DataFrame -> DataFrame and Column -> Column functions: no reads, writes or actions.

The same functions serve streaming and batch DataFrames; only the edges (sources, sinks,
triggers) know the execution mode.
"""
