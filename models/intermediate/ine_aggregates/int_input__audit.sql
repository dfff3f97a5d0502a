-- The audit rows that only the bundled-data mode produces, under the name audit_data_quality
-- reads in either mode.
{{ config(materialized = 'view') }}

select * from {{ ref('int_audit__ine_inputs') }}
