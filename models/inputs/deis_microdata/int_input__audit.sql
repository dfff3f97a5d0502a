-- The audit rows that only the microdata mode produces, under the name audit_data_quality reads
-- in either mode. Ephemeral (a CTE of audit_data_quality), not a view: the warehouse file holds
-- no views (a view names the file's catalog and breaks in a copy under another name).
{{ config(materialized = 'ephemeral') }}

select * from {{ ref('int_audit__deis_records') }}
