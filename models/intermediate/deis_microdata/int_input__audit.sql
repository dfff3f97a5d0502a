-- The audit rows that only the microdata mode produces, under the name audit_data_quality reads
-- in either mode.
{{ config(materialized = 'view') }}

select * from {{ ref('int_audit__deis_records') }}
