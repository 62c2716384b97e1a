-- How a run's views read the Parquet cache (tracekit/store/run.py): each base table is the
-- union (by column name) of its batches' files.

-- @query whole_batches
-- Every row of the batch files {files} (a list of quoted paths) of one table: one scan.
SELECT * FROM read_parquet([{files}], union_by_name = true)

-- @query some_ranks
-- The rows of ranks {ranks} (integer literals) of the batch file {file}: a batch that
-- also holds ranks not chosen, or ranks ingested again since into another batch.
SELECT * FROM read_parquet({file}) WHERE rank IN ({ranks})
