-- The trend methods, from the seed `trend_methods` (the one list of method codes), under a
-- contract: join fct_trends (and the other trend marts) on `method` to label a method and its
-- p-value's test in English or Spanish.
select
    method,
    sort_order,
    fitter,
    label_en,
    label_es,
    p_value_test_en,
    p_value_test_es
from {{ ref('trend_methods') }}
